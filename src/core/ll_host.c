/* The latency path on the CPU backend: one stream closure per call runs
 * the protocol of ll.h — its phases, flags, generations and moves — with
 * the call's blocks as small state machines. A GPU runs its blocks at
 * once, so any order is legal: each round steps every unfinished block by
 * one phase, in a shuffled order, and a block whose barrier is not complete
 * waits for a later round. Flags live in the emulated devices' memory and
 * are stored and polled with release/acquire atomics, as the kernels do. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "device.h"
#include "ll.h"

/* Waiters sleep until a flag is stored anywhere in the process (an epoch
 * counts the stores, so none is missed), and look again every 20 ms: an
 * abort is raised by plain stores and by the run's abort flag. */
static pthread_mutex_t wake_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake_cv = PTHREAD_COND_INITIALIZER;
static uint64_t wake_epoch;

static uint64_t epoch_now(void)
{
    uint64_t e;
    pthread_mutex_lock(&wake_mu);
    e = wake_epoch;
    pthread_mutex_unlock(&wake_mu);
    return e;
}

static void wake_all(void)
{
    pthread_mutex_lock(&wake_mu);
    wake_epoch++;
    pthread_cond_broadcast(&wake_cv);
    pthread_mutex_unlock(&wake_mu);
}

static void sleep_past(uint64_t epoch)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 20 * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&wake_mu);
    while (wake_epoch == epoch)
        if (pthread_cond_timedwait(&wake_cv, &wake_mu, &ts) != 0)
            break;
    pthread_mutex_unlock(&wake_mu);
}

static float load_f(int dtype, const char *p, size_t i)
{
    switch (dtype) {
    case HN_BF16: { uint16_t h; memcpy(&h, p + 2 * i, 2); return hn_bf16_to_f32(h); }
    case HN_F16: { uint16_t h; memcpy(&h, p + 2 * i, 2); return hn_f16_to_f32(h); }
    default: { float f; memcpy(&f, p + 4 * i, 4); return f; }
    }
}

static void store_f(int dtype, char *p, size_t i, float v)
{
    uint16_t h;
    switch (dtype) {
    case HN_BF16: h = hn_f32_to_bf16(v); memcpy(p + 2 * i, &h, 2); break;
    case HN_F16: h = hn_f32_to_f16(v); memcpy(p + 2 * i, &h, 2); break;
    default: memcpy(p + 4 * i, &v, 4); break;
    }
}

/* One move: a copy, or a reduction of n sources in team order (fp32). */
static void do_move(const hn_ll_args *a, const hn_ll_move *mv)
{
    size_t es = hn_ll_es(a);
    if (mv->elems == 0)
        return;
    if (mv->nsrc == 1) {
        if (mv->dst != mv->src[0])
            memmove(mv->dst, mv->src[0], mv->elems * es);
        return;
    }
    for (size_t i = 0; i < mv->elems; i++) {
        float acc = load_f(a->dtype, mv->src[0], i);
        for (int p = 1; p < mv->nsrc; p++)
            acc = hn_ll_combine(a->redop, acc, load_f(a->dtype, mv->src[p], i));
        store_f(a->dtype, mv->dst, i, hn_ll_finish(a->redop, acc, mv->nsrc));
    }
}

typedef struct block {
    int pc;                                /* next phase */
    const char *peer[HN_LL_MAX_RANKS];     /* two-shot: the members' inputs, read after barrier A */
} block;

/* Runs phase ph of block b; 0 when it must wait (a barrier not complete). */
static int step(const hn_ll_args *a, uint32_t g, block *B, int b, int ph)
{
    hn_ll_signal *mine = a->sig[a->me];
    int bar = hn_ll_barrier_of(ph);
    hn_ll_move mv;
    switch (ph) {
    case HN_LL_PUBLISH:
        for (int p = 0; p < a->n; p++)
            __atomic_store_n(&a->sig[p]->ptr[g & 1u][b][a->me], (uint64_t)(uintptr_t)a->send, __ATOMIC_RELAXED);
        return 1;
    case HN_LL_SIGNAL_A:
    case HN_LL_SIGNAL_B:
        for (int p = 0; p < a->n; p++)
            __atomic_store_n(&a->sig[p]->flag[bar][b][a->me], g, __ATOMIC_RELEASE);
        wake_all();
        return 1;
    case HN_LL_WAIT_A:
    case HN_LL_WAIT_B:
        for (int p = 0; p < a->n; p++)
            if (!hn_ll_reached(__atomic_load_n(&mine->flag[bar][b][p], __ATOMIC_ACQUIRE), g))
                return 0;
        if (ph == HN_LL_WAIT_A && a->algo == HN_LL_TWOSHOT)
            for (int p = 0; p < a->n; p++)
                B->peer[p] = (const char *)(uintptr_t)__atomic_load_n(&mine->ptr[g & 1u][b][p], __ATOMIC_RELAXED);
        return 1;
    default:
        for (int k = 0; hn_ll_move_at(a, ph, b, g, B->peer, k, &mv); k++)
            do_move(a, &mv);
        return 1;
    }
}

static const char *kind_name(int kind)
{
    return kind == HN_LL_ALLREDUCE ? "allreduce" : kind == HN_LL_ALLGATHER ? "allgather" : "reduce_scatter";
}

/* How many (block, member) flags the blocks waiting at a barrier have. */
static int count_arrived(const hn_ll_args *a, uint32_t g, const block *B, const int *ph)
{
    hn_ll_signal *mine = a->sig[a->me];
    int k = 0;
    for (int b = 0; b < a->blocks; b++)
        if (ph[B[b].pc] == HN_LL_WAIT_A || ph[B[b].pc] == HN_LL_WAIT_B)
            for (int p = 0; p < a->n; p++)
                k += hn_ll_reached(__atomic_load_n(&mine->flag[hn_ll_barrier_of(ph[B[b].pc])][b][p],
                                                   __ATOMIC_ACQUIRE), g);
    return k;
}

/* Nothing moved for the run's deadline — no block of this call, no peer
 * reaching a barrier it waits at: names the members whose flags the first
 * waiting block still lacks. */
static void report_absent(const hn_ll_args *a, uint32_t g, const block *B, const int *ph, const hn_origin *o)
{
    hn_ll_signal *mine = a->sig[a->me];
    char who[128] = "";
    int nwho = 0, wb = -1, bar = 0;
    size_t len = 0;
    for (int b = 0; b < a->blocks && wb < 0; b++)
        if (ph[B[b].pc] == HN_LL_WAIT_A || ph[B[b].pc] == HN_LL_WAIT_B) {
            wb = b;
            bar = hn_ll_barrier_of(ph[B[b].pc]);
        }
    for (int p = 0; p < a->n && wb >= 0; p++)
        if (!hn_ll_reached(__atomic_load_n(&mine->flag[bar][wb][p], __ATOMIC_ACQUIRE), g) && len < sizeof(who) - 16) {
            len += (size_t)snprintf(who + len, sizeof(who) - len, "%s%d", nwho ? ", " : "", a->ranks[p]);
            nwho++;
        }
    hn_origin_fail(o, HN_ERR_TIMEOUT,
                   "ll %s (%s, generation %u): rank%s %s never arrived (barrier %c of block %d; nothing moved "
                   "for %.0f s)", kind_name(a->kind), a->algo == HN_LL_ONESHOT ? "one-shot" : "two-shot", g,
                   nwho > 1 ? "s" : "", who, bar ? 'B' : 'A', wb, o->sink != NULL ? o->sink->timeout_s : 60.0);
}

static hn_status_t run_call(void *arg, const hn_origin *o)
{
    const hn_ll_args *a = arg;
    hn_ll_signal *mine = a->sig[a->me];
    uint32_t g = __atomic_load_n(&mine->gen, __ATOMIC_RELAXED) + 1;
    int ph[HN_LL_MAX_PHASES + 1], nph = hn_ll_phases(a->kind, a->algo, ph), left = a->blocks;
    int order[HN_LL_MAX_BLOCKS];
    uint64_t rng = ((uint64_t)g << 32) ^ (uint64_t)(a->me * 7919 + a->blocks);
    double timeout = o->sink != NULL ? o->sink->timeout_s : 60.0, last = hn_now();
    int seen = 0;
    block B[HN_LL_MAX_BLOCKS];
    memset(B, 0, sizeof(B));
    ph[nph] = -1;
    for (int b = 0; b < a->blocks; b++)
        order[b] = b;
    while (left > 0) {
        uint64_t epoch = epoch_now();
        int moved = 0;
        for (int i = a->blocks - 1; i > 0; i--) { /* this round's order */
            int j = (int)(hn_splitmix64(&rng) % (uint64_t)(i + 1)), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (int i = 0; i < a->blocks; i++) {
            int b = order[i];
            if (B[b].pc == nph || !step(a, g, &B[b], b, ph[B[b].pc]))
                continue;
            moved = 1;
            if (++B[b].pc < nph)
                continue;
            left--;
            /* as in the kernel: the last block to finish stores the generation */
            if (__atomic_fetch_add(&mine->done, 1, __ATOMIC_RELAXED) == (uint32_t)a->blocks - 1) {
                __atomic_store_n(&mine->done, 0, __ATOMIC_RELAXED);
                __atomic_store_n(&mine->gen, g, __ATOMIC_RELAXED);
            }
        }
        if (!moved) { /* a peer's arrival at a barrier we wait at is progress too */
            int arrived = count_arrived(a, g, B, ph);
            moved = arrived != seen;
            seen = arrived;
        }
        if (moved) {
            last = hn_now();
            continue;
        }
        if (__atomic_load_n(&mine->abort, __ATOMIC_RELAXED) || hn_origin_aborted(o))
            return HN_ERR_ABORTED;
        if (hn_now() - last > timeout) {
            report_absent(a, g, B, ph, o);
            return HN_ERR_TIMEOUT;
        }
        sleep_past(epoch);
    }
    return HN_OK;
}

hn_status_t hn_ll_host(hn_dstream *s, const hn_ll_args *a, const hn_origin *o)
{
    hn_ll_args *c = hn_malloc(sizeof(*c));
    if (c == NULL)
        return HN_ERR_NOMEM;
    *c = *a;
    return hn_device_host.launch_host(s, run_call, c, hn_free, o);
}

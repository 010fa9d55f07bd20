/* The latency path's protocol (low-latency collectives through peers'
 * memory, docs/ARCHITECTURE.md "The latency path"): the arguments the ll
 * communicator hands a compute backend, the signal region every member
 * keeps in its device memory, and the protocol itself — phases, flags,
 * generations, which block touches which bytes — as functions compiled
 * both as C (the CPU emulation, ll_host.c) and as CUDA (the kernels,
 * ll_cuda.cu), so that the two run one protocol.
 *
 * A call of a team is run by `blocks` blocks on every member (CUDA thread
 * blocks; emulated ones on the host). Block b of every member works on the
 * same slice b of the data, and barriers are per block: block b signals
 * block b of every member (a flag in that member's signal region, indexed
 * by barrier, block and sender) and waits for all of theirs.
 *
 * Generations. Every member's signal region holds `gen`, the generation of
 * its last call on the team; a call runs as generation g = gen + 1 and its
 * last block to finish stores g (so the counter lives on the device and a
 * captured CUDA graph replays correctly). Members issue a team's calls in
 * the same order, so they agree on g. Flags carry g and are compared
 * wrap-safe (reached: have - want >= 0 as int32), so they are never reset.
 *
 * Algorithms:
 *  - one-shot: every block copies its slice of the input into the
 *    member's registered buffer, half g % 2 (STAGE_IN); barrier A; then
 *    reads that slice from every member's half g % 2 and reduces (fp32,
 *    team order) or gathers into its output (READ_STAGED). One barrier.
 *  - two-shot: the input is read in place. Every block writes its input's
 *    address into every member's pointer slot [g % 2][b][me] (PUBLISH);
 *    barrier A; allreduce: block b reduces slice b of the member's own
 *    chunk from every member's input into its buffer, half g % 2
 *    (REDUCE_CHUNK); barrier B; reads slice b of every member's reduced
 *    chunk into its output (GATHER_CHUNKS). Allgather and reduce_scatter
 *    read peers' inputs directly (READ_DIRECT); barrier B then keeps every
 *    input in place until all have read it.
 *
 * Why this is safe under any interleaving (back-to-back calls, no host
 * sync, sizes changing between calls): a member's call g + 1 starts only
 * after its call g has ended (stream order; the communicator orders calls
 * issued on different streams with an event). So if any block of member p
 * has passed a barrier of call h, block b of every member has reached that
 * barrier of h, and hence has finished call h - 1 altogether.
 *  - one-shot writes half g % 2 before its barrier: p does so in call g + 2
 *    only after its call g + 1 ended, whose barrier every member reached
 *    after finishing call g, the last that read half g % 2. Two halves are
 *    what lets a one-shot call go with one barrier.
 *  - two-shot writes half g % 2 after barrier A of g, which every member
 *    reached after finishing g - 1; the half was last read in g - 2 or
 *    earlier, or in g after barrier B.
 *  - an input read in place is read between barriers A and B of its call;
 *    its owner's kernel cannot end (and later work cannot overwrite it)
 *    before every member reached B.
 *  - pointer slot [g % 2] is rewritten in call g + 2, after every member
 *    ended call g + 1.
 *  - a flag slot is rewritten with g + 1 only once every member reached
 *    g's barriers, and a waiter accepts any value reached: it never sees a
 *    value more than one ahead of the one it waits for.
 *
 * A dead peer: a CUDA kernel cannot time out (a bounded spin could only
 * trap, which loses the context), so every wait also polls the member's
 * `abort` word. The host's stream sync has the run's deadline; the
 * watchdog's failure then makes the communicator raise every member's
 * abort word (comm_ll.c), the waiting blocks leave without touching peer
 * memory, and the teams are made anew. The CPU emulation polls the same
 * word and the run's abort flag, and names the member that never arrived
 * once nothing moved for the run's deadline. */
#ifndef HN_LL_H
#define HN_LL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "device.h"
#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
#define HN_LL_FN __host__ __device__ static inline
#else
#define HN_LL_FN static inline
#endif

#define HN_LL_MAX_RANKS 8
#define HN_LL_MAX_BLOCKS 64
#define HN_LL_THREADS 512       /* threads of a CUDA block */
#define HN_LL_VEC 16            /* bytes of one vector load */
#define HN_LL_BLOCK_BYTES 8192  /* work per block: a block per 8 KiB of a slice's range, up to MAX_BLOCKS */

enum { HN_LL_ALLREDUCE, HN_LL_ALLGATHER, HN_LL_REDUCE_SCATTER };
/* algorithms; 0 lets the communicator pick */
enum { HN_LL_AUTO, HN_LL_ONESHOT, HN_LL_TWOSHOT };
enum { HN_LL_BARRIER_A, HN_LL_BARRIER_B, HN_LL_BARRIERS };

/* The phases a block goes through, in order (the header comment). */
typedef enum hn_ll_phase {
    HN_LL_STAGE_IN,
    HN_LL_PUBLISH,
    HN_LL_SIGNAL_A,
    HN_LL_WAIT_A,
    HN_LL_READ_STAGED,
    HN_LL_READ_DIRECT,
    HN_LL_REDUCE_CHUNK,
    HN_LL_SIGNAL_B,
    HN_LL_WAIT_B,
    HN_LL_GATHER_CHUNKS,
    HN_LL_MAX_PHASES = 8
} hn_ll_phase;

/* In each member's device memory, zeroed when the team is joined. The
 * flags and pointer slots are written by the senders (peer stores). */
typedef struct hn_ll_signal {
    uint32_t gen;   /* generation of the member's last call (its last block stores it) */
    uint32_t done;  /* blocks of the running call that have finished */
    uint32_t abort; /* raised by the host after a failure: every wait gives up */
    uint32_t pad_;
    uint32_t flag[HN_LL_BARRIERS][HN_LL_MAX_BLOCKS][HN_LL_MAX_RANKS]; /* [barrier][block][sender] = g */
    uint64_t ptr[2][HN_LL_MAX_BLOCKS][HN_LL_MAX_RANKS];               /* [g % 2][block][sender]: its input */
} hn_ll_signal;

/* One call, as issued by member `me` (passed by value to the kernel). */
typedef struct hn_ll_args {
    int kind;   /* HN_LL_ALLREDUCE, ... */
    int algo;   /* HN_LL_ONESHOT or HN_LL_TWOSHOT */
    int n, me;  /* team size, the issuing member */
    int blocks; /* hn_ll_blocks: the same on every member */
    int dtype;  /* hn_dtype */
    int redop;  /* HN_REDUCE_* (comm.h): sum, prod, max, min, avg */
    size_t count; /* as hn_coll_args: allreduce all, allgather the input, reduce_scatter the output */
    const void *send;
    void *recv;
    hn_ll_signal *sig[HN_LL_MAX_RANKS]; /* every member's signal region */
    char *stage[HN_LL_MAX_RANKS];       /* every member's registered buffer: two halves */
    size_t half;                        /* bytes of one half */
    int ranks[HN_LL_MAX_RANKS];         /* global ranks (messages) */
} hn_ll_args;

/* A data movement of a phase: `elems` elements into dst, from one source
 * (a copy) or from n sources in team order (a reduction). */
typedef struct hn_ll_move {
    char *dst;
    const char *src[HN_LL_MAX_RANKS];
    int nsrc;
    size_t elems;
} hn_ll_move;

HN_LL_FN int hn_ll_reached(uint32_t have, uint32_t want) { return (int32_t)(have - want) >= 0; }

HN_LL_FN size_t hn_ll_es(const hn_ll_args *a)
{
    return a->dtype == HN_F32 || a->dtype == HN_I32 ? 4 : a->dtype == HN_I64 ? 8 : 2;
}

/* Elements per vector, and `x` rounded up to a multiple of them. */
HN_LL_FN size_t hn_ll_round_vec(size_t x, size_t es)
{
    size_t v = HN_LL_VEC / es;
    return (x + v - 1) / v * v;
}

/* Chunk p of an allreduce's `count` elements for two-shot: equal chunks
 * of whole vectors, the last ones shorter or empty. */
HN_LL_FN void hn_ll_chunk(size_t count, int n, size_t es, int p, size_t *lo, size_t *hi)
{
    size_t c = hn_ll_round_vec((count + (size_t)n - 1) / (size_t)n, es);
    *lo = (size_t)p * c < count ? (size_t)p * c : count;
    *hi = *lo + c < count ? *lo + c : count;
}

/* Slice b of `len` elements: whole vectors, the tail in the last slice. */
HN_LL_FN void hn_ll_slice(size_t len, size_t es, int b, int blocks, size_t *lo, size_t *hi)
{
    size_t per = hn_ll_round_vec((len + (size_t)blocks - 1) / (size_t)blocks, es);
    *lo = (size_t)b * per < len ? (size_t)b * per : len;
    *hi = *lo + per < len ? *lo + per : len;
}

/* The range every block slices, in elements (the same on every member). */
HN_LL_FN size_t hn_ll_range(int kind, int algo, size_t count, size_t es, int n)
{
    size_t lo, hi;
    if (kind != HN_LL_ALLREDUCE || algo != HN_LL_TWOSHOT)
        return count;
    hn_ll_chunk(count, n, es, 0, &lo, &hi);
    return hi - lo; /* the largest chunk */
}

HN_LL_FN int hn_ll_blocks(int kind, int algo, size_t count, size_t es, int n)
{
    size_t bytes = hn_ll_range(kind, algo, count, es, n) * es;
    size_t b = (bytes + HN_LL_BLOCK_BYTES - 1) / HN_LL_BLOCK_BYTES;
    return b < 1 ? 1 : b > HN_LL_MAX_BLOCKS ? HN_LL_MAX_BLOCKS : (int)b;
}

/* Bytes of one half of the registered buffer a call needs. */
HN_LL_FN size_t hn_ll_stage_need(int kind, int algo, size_t count, size_t es, int n)
{
    if (algo == HN_LL_TWOSHOT)
        return kind == HN_LL_ALLREDUCE ? hn_ll_range(kind, algo, count, es, n) * es : 0;
    return (kind == HN_LL_REDUCE_SCATTER ? (size_t)n : 1) * count * es;
}

/* The phases of (kind, algo) into ph; their number. */
HN_LL_FN int hn_ll_phases(int kind, int algo, int *ph)
{
    int k = 0;
    if (algo == HN_LL_ONESHOT) {
        ph[k++] = HN_LL_STAGE_IN;
        ph[k++] = HN_LL_SIGNAL_A;
        ph[k++] = HN_LL_WAIT_A;
        ph[k++] = HN_LL_READ_STAGED;
        return k;
    }
    ph[k++] = HN_LL_PUBLISH;
    ph[k++] = HN_LL_SIGNAL_A;
    ph[k++] = HN_LL_WAIT_A;
    if (kind == HN_LL_ALLREDUCE) {
        ph[k++] = HN_LL_REDUCE_CHUNK;
        ph[k++] = HN_LL_SIGNAL_B;
        ph[k++] = HN_LL_WAIT_B;
        ph[k++] = HN_LL_GATHER_CHUNKS;
    } else {
        ph[k++] = HN_LL_READ_DIRECT;
        ph[k++] = HN_LL_SIGNAL_B;
        ph[k++] = HN_LL_WAIT_B;
    }
    return k;
}

HN_LL_FN int hn_ll_barrier_of(int phase) { return phase == HN_LL_SIGNAL_B || phase == HN_LL_WAIT_B; }

/* Member p's registered buffer, half g % 2. */
HN_LL_FN char *hn_ll_half(const hn_ll_args *a, int p, uint32_t g)
{
    return a->stage[p] + (size_t)(g & 1u) * a->half;
}

/* Move k of a data phase of block b in generation g (peer: the members'
 * inputs as published, two-shot only); 0 once there is no move k. Every
 * address a block reads or writes comes from here. */
HN_LL_FN int hn_ll_move_at(const hn_ll_args *a, int phase, int b, uint32_t g, const char *const *peer, int k,
                           hn_ll_move *mv)
{
    size_t es = hn_ll_es(a), lo, hi, clo = 0, chi = 0;
    const char *send = (const char *)a->send;
    char *recv = (char *)a->recv, *mine = hn_ll_half(a, a->me, g);
    int n = a->n, me = a->me;
    if (phase == HN_LL_GATHER_CHUNKS) { /* slice b of member k's chunk */
        if (k >= n)
            return 0;
        hn_ll_chunk(a->count, n, es, k, &clo, &chi);
        hn_ll_slice(chi - clo, es, b, a->blocks, &lo, &hi);
        mv->dst = recv + (clo + lo) * es;
        mv->src[0] = hn_ll_half(a, k, g) + lo * es;
        mv->nsrc = 1;
        mv->elems = hi - lo;
        return 1;
    }
    if (phase == HN_LL_REDUCE_CHUNK) {
        if (k > 0)
            return 0;
        hn_ll_chunk(a->count, n, es, me, &clo, &chi);
        hn_ll_slice(chi - clo, es, b, a->blocks, &lo, &hi);
        mv->dst = mine + lo * es;
        for (int p = 0; p < n; p++)
            mv->src[p] = peer[p] + (clo + lo) * es;
        mv->nsrc = n;
        mv->elems = hi - lo;
        return 1;
    }
    hn_ll_slice(a->count, es, b, a->blocks, &lo, &hi);
    mv->elems = hi - lo;
    mv->nsrc = 1;
    if (phase == HN_LL_STAGE_IN) { /* reduce_scatter stages slice b of every chunk */
        size_t off = (a->kind == HN_LL_REDUCE_SCATTER ? (size_t)k * a->count : 0) + lo;
        if (k >= (a->kind == HN_LL_REDUCE_SCATTER ? n : 1))
            return 0;
        mv->dst = mine + off * es;
        mv->src[0] = send + off * es;
        return 1;
    }
    /* READ_STAGED, READ_DIRECT: from the members' halves g % 2, or their inputs */
    if (a->kind == HN_LL_ALLGATHER) {
        if (k >= n)
            return 0;
        mv->dst = recv + ((size_t)k * a->count + lo) * es;
        mv->src[0] = (phase == HN_LL_READ_STAGED ? hn_ll_half(a, k, g) : peer[k]) + lo * es;
        return 1;
    }
    if (k > 0)
        return 0;
    {
        size_t off = (a->kind == HN_LL_REDUCE_SCATTER ? (size_t)me * a->count : 0) + lo;
        mv->dst = recv + lo * es;
        for (int p = 0; p < n; p++)
            mv->src[p] = (phase == HN_LL_READ_STAGED ? hn_ll_half(a, p, g) : peer[p]) + off * es;
        mv->nsrc = n;
    }
    return 1;
}

/* fp32 accumulation of the reductions (avg divides the sum at the end) */
HN_LL_FN float hn_ll_combine(int redop, float acc, float x)
{
    switch (redop) {
    case 1: return acc * x;               /* prod */
    case 2: return acc > x ? acc : x;     /* max */
    case 3: return acc < x ? acc : x;     /* min */
    default: return acc + x;              /* sum, avg */
    }
}

HN_LL_FN float hn_ll_finish(int redop, float acc, int n) { return redop == 4 ? acc / (float)n : acc; }

/* The compute tables' `ll` entries: issue one call on s; return at once. */
#ifdef __cplusplus
extern "C" {
#endif
hn_status_t hn_ll_host(hn_dstream *s, const hn_ll_args *a, const hn_origin *o);
hn_status_t hn_ll_cuda(hn_dstream *s, const hn_ll_args *a, const hn_origin *o);
#ifdef __cplusplus
}
#endif

#endif
